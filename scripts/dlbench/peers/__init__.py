"""The peers: what a user would run instead of dlbench's kernels (NumPy,
PyTorch eager, TorchScript, torch.compile, ONNX Runtime, OpenVINO), on the
same work, validated and timed the way bench does it, written as Google
Benchmark JSON entries with the same names and counters.

    harness.py   the selection, the checks, the timing, the JSON entries
    ops.py       daxpy, softmax / log_softmax, conv, gemm, copy (GPU)
    networks.py  resnet20, mnist_cnn, mnist_lenet

scripts/peers is the command. Nothing here is imported by the light
environment's scripts (plot, compare, readme) except through the JSON it
writes; ops.py needs only NumPy for its NumPy peers, everything else imports
its framework when a case of it is selected and says so in one line when the
framework is missing."""
