"""The three networks of dlbench as PyTorch modules, with the parameter names
the C++ side reads (kernels/nn/model/network.cpp), and the Fashion-MNIST input
pipeline both sides share. Imports torch: use from the peers environment
(.venv-peers, made by scripts/train.py and scripts/peers), not from .venv.

    resnet20     He et al.'s CIFAR ResNet (3 stages x 3 basic blocks, 16/32/64
                 channels), 1x1 conv + BN projection shortcuts on the two
                 downsampling blocks, identity elsewhere; input 3x32x32
    mnist_cnn    PyTorch's examples/mnist network (dropout is identity at
                 inference); input 1x28x28; output log-softmax
    mnist_lenet  the LeNet-style network of the quantization tutorials;
                 input 1x28x28; output log-softmax
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# Fashion-MNIST training-set pixel statistics (pixels / 255). Written into
# every weights file's metadata by scripts/train.py; the C++ side and
# scripts/peers normalize with what they read there.
FASHION_MEAN = 0.2860
FASHION_STD = 0.3530


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


class ResNet20(nn.Module):
    input_shape = (3, 32, 32)

    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        stages, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            blocks = [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1), BasicBlock(cout, cout, 1)]
            stages.append(nn.Sequential(*blocks))
            cin = cout
        self.stage1, self.stage2, self.stage3 = stages
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.stage3(self.stage2(self.stage1(x)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class MnistCnn(nn.Module):
    input_shape = (1, 28, 28)

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
        return F.log_softmax(self.fc2(x), dim=1)


class MnistLenet(nn.Module):
    input_shape = (1, 28, 28)

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, 1)
        self.conv2 = nn.Conv2d(20, 50, 5, 1)
        self.fc1 = nn.Linear(800, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


NETWORKS = {"resnet20": ResNet20, "mnist_cnn": MnistCnn, "mnist_lenet": MnistLenet}


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzip or plain) as a uint8 array of its dimensions."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fashion(data_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(data_dir / f"{prefix}-images-idx3-ubyte.gz")
    labels = read_idx(data_dir / f"{prefix}-labels-idx1-ubyte.gz")
    return images, labels


def network_input(images: np.ndarray, input_shape, mean: float = FASHION_MEAN, std: float = FASHION_STD) -> torch.Tensor:
    """uint8 [n, 28, 28] -> the network's float input: (pixel/255 - mean)/std,
    then for a 3x32x32 network zero-padded by 2 on every side (zeros after
    normalization) and repeated over 3 channels. kernels/nn/data/dataset.cpp does
    the same."""
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - mean) / std
    x = x.unsqueeze(1)
    c, h, w = input_shape
    if (h, w) != tuple(x.shape[2:]):
        ph, pw = (h - x.shape[2]) // 2, (w - x.shape[3]) // 2
        x = F.pad(x, (pw, w - x.shape[3] - pw, ph, h - x.shape[2] - ph))
    if c != 1:
        x = x.repeat(1, c, 1, 1)
    return x.contiguous()
