"""Build script of the xmod Python client: generates the gRPC stubs at build time.

`build_py` runs grpcio-tools' protoc over proto/xmod/v1/*.proto and writes the modules into
the build tree as the package `xmod.v1` (xmod/v1/spec_pb2.py imports
`from xmod.v1 import ...`, which resolves inside the installed `xmod` package). The protos are
read from the checkout (../../proto) or, when building from an sdist, from the copy that
`sdist` puts at ./proto. The runtime dependencies are pinned to at least the grpcio and
protobuf versions the stubs were generated with: generated code refuses older runtimes.
"""
import glob
import os
import shutil
from importlib.metadata import version

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_root():
    """The folder holding xmod/v1/*.proto: an sdist's copy, else the checkout's proto/."""
    for root in (os.path.join(HERE, "proto"), os.path.join(HERE, "..", "..", "proto")):
        if glob.glob(os.path.join(root, "xmod", "v1", "*.proto")):
            return os.path.normpath(root)
    raise RuntimeError(
        "xmod client: no proto/xmod/v1/*.proto next to setup.py or at ../../proto; build "
        "from the xmod checkout (pip install ./clients/python) or from its sdist")


def generate_stubs(out_dir):
    """Writes xmod/v1/*_pb2.py, *_pb2.pyi and *_pb2_grpc.py under out_dir."""
    import grpc_tools
    from grpc_tools import protoc

    root = proto_root()
    protos = sorted(os.path.relpath(p, root)
                    for p in glob.glob(os.path.join(root, "xmod", "v1", "*.proto")))
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    os.makedirs(os.path.join(out_dir, "xmod", "v1"), exist_ok=True)
    args = ["grpc_tools.protoc", f"-I{root}", f"-I{well_known}", f"--python_out={out_dir}",
            f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {', '.join(protos)} (from {root})")


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        # An editable install imports from src/, so the stubs go there (gitignored).
        generate_stubs(os.path.join(HERE, "src") if self.editable_mode else self.build_lib)


class SdistWithProtos(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        src = os.path.join(proto_root(), "xmod", "v1")
        dst = os.path.join(base_dir, "proto", "xmod", "v1")
        os.makedirs(dst, exist_ok=True)
        for path in glob.glob(os.path.join(src, "*.proto")):
            shutil.copy2(path, dst)


def runtime_requirements():
    grpc = version("grpcio-tools")
    protobuf = version("protobuf")
    major = int(protobuf.split(".")[0])
    return [f"grpcio>={grpc}", f"protobuf>={protobuf},<{major + 1}", "pandas>=1.5"]


setup(
    cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos},
    install_requires=runtime_requirements(),
)
