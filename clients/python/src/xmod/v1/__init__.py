"""The xmod.v1 protobuf and gRPC modules (spec_pb2, types_pb2, coordinator_pb2,
coordinator_pb2_grpc, ...), generated from proto/xmod/v1/*.proto when the package is built
(setup.py); this folder holds no hand-written code."""
