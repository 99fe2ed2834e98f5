# LibTorch model targets (xmod_model); owned by the model engineer.
