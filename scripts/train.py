#!/usr/bin/env python3
"""Trains dlbench's networks on Fashion-MNIST with PyTorch, reproducibly, and
writes what the C++ side reads (models/fashion-mnist/):

    <net>.safetensors            the state_dict, PyTorch's names, fp32 (and
                                 BN's int64 num_batches_tracked), metadata:
                                 input normalization, data set, seed, epochs
    <net>.reference.safetensors  PyTorch's output for the first 256 test images
                                 ("logits", f32 [256, 10]), its top-1 class for
                                 every test image ("predictions", u8 [10000]),
                                 the test labels ("labels", u8 [10000]);
                                 metadata: test accuracy, torch version

    scripts/train.py [--nets resnet20,mnist_cnn,mnist_lenet] [--epochs N ...]
                     [--data-dir /usr/share/datasets/fashion-mnist] [--out models/fashion-mnist]
                     [--reference-only] [--train-reference] [--epoch-reference]

Runs in the peers environment (.venv-peers: PyTorch, safetensors), created on
first use; not part of CI. Fixed seeds, deterministic algorithms, one
process: the same machine and versions give the same weights.
--reference-only recomputes the reference files from the committed weights.

--train-reference writes, for mnist_cnn and resnet20, what the C++
training step's tests compare with (issue 35), from the committed weights:

    <net>.train-reference.safetensors
        "labels"        u8 [64]: the labels of the batch, the first 64
                        training images as network_input lays them out (no
                        augmentation, no shuffling)
        "loss"          f32 [1]: the mean cross-entropy over the batch
                        (mnist_cnn: nll_loss of its log-softmax output;
                        resnet20: cross_entropy of its logits)
        "log_probs"     f32 [64, 10]
        "grad.<param>"  f32, every parameter's gradient after one backward
        "step2.<param>" f32, the parameters after two SGD steps (lr 0.01,
                        momentum 0.9, no weight decay, dampening 0) on the
                        same batch, but for the largest tensors (mnist_cnn:
                        fc1.weight, 1.18 M floats; resnet20: stage3's conv
                        weights, 203 K of its 272 K), left out for size: their
                        updates are checked through their gradients, and
                        the other tensors' steps share their code
        "step1.<bn>.running_mean", "step1.<bn>.running_var",
        "step2.<bn>.running_mean", "step2.<bn>.running_var"
                        resnet20: every batch-norm's running statistics
                        after the first step's forward, and after the
                        second's
        metadata: batch, lr, momentum, mode, parameters (named_parameters
        order, comma-separated), torch version

    Mode: mnist_cnn runs with model.eval(), i.e. dropout off (its two
    dropouts are its only training-mode difference): the step is
    deterministic, as the C++ one is. resnet20 runs with model.train():
    batch-norm normalizes with the batch's statistics and updates its
    running statistics (momentum 0.1); it has no dropout. Deterministic
    algorithms, one thread count given by --threads.

--epoch-reference writes, for mnist_cnn and mnist_lenet, one epoch of
PyTorch's SGD step from a fresh start that the C++ side makes identically
(scripts/dlbench/epoch.py, kernels/nn/train/epoch.h; tests/test_epoch.cpp reads it):

    <net>.epoch-reference.json
        the configuration (batch 64, SGD lr 0.01 momentum 0.9, the seed of the
        initialization and of the order, no augmentation, dropout off,
        the last partial batch dropped: 937 steps), the first values and the
        sum of every fresh parameter tensor and the first indices of the
        order (the C++ test checks its generator against them), the loss of
        every step, the test accuracy and loss after the epoch (10,000
        images), the torch version and thread count (--threads); and in
        "other_runs" the same epoch on 1 thread (the losses, the accuracy):
        another rounding of the same computation
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from dlbench import cli, venv  # noqa: E402

venv.reexec("train", venv.PEERS_VENV, venv.PEERS_REQUIREMENTS)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from dlbench.nets import FASHION_MEAN, FASHION_STD, NETWORKS, load_fashion, network_input  # noqa: E402
from dlbench import torch_epoch  # noqa: E402
from dlbench.torch_epoch import EPOCH_BATCH, EPOCH_LR, EPOCH_MOMENTUM, EPOCH_NETS, EPOCH_SEED  # noqa: E402

REFERENCE_IMAGES = 256
TRAIN_REFERENCE_BATCH = 64
TRAIN_REFERENCE_LR = 0.01
TRAIN_REFERENCE_MOMENTUM = 0.9
TRAIN_REFERENCE_NETS = ("mnist_cnn", "resnet20")
# Left out of step2 for size (see the module docstring).
TRAIN_REFERENCE_STEP2_SKIP = {"mnist_cnn": lambda p: p == "fc1.weight",
                              "resnet20": lambda p: p.startswith("stage3.") and ".conv" in p}
DEFAULT_EPOCHS = {"resnet20": 4, "mnist_cnn": 2, "mnist_lenet": 2}
SEED = 20261123


def make_optimizer(name: str, model, steps: int, epochs: int):
    if name == "resnet20":
        # He et al.'s recipe, shortened: SGD with momentum and weight decay,
        # one-cycle learning rate over the few epochs we can afford on 2 cores.
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=steps)
    else:
        # PyTorch's examples/mnist: Adadelta, lr 1.0, decayed by 0.7 an epoch.
        opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
        per_epoch = steps // epochs
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.7 ** (step // per_epoch))
    return opt, sched


def train(name: str, epochs: int, train_x: torch.Tensor, train_y: torch.Tensor, batch: int = 128):
    torch.manual_seed(SEED)
    model = NETWORKS[name]()
    generator = torch.Generator().manual_seed(SEED)
    steps = epochs * ((len(train_x) + batch - 1) // batch)
    opt, sched = make_optimizer(name, model, steps, epochs)
    model.train()
    for epoch in range(epochs):
        start = time.time()
        order = torch.randperm(len(train_x), generator=generator)
        total, correct, loss_sum = 0, 0, 0.0
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            x, y = train_x[idx], train_y[idx]
            if name == "resnet20":
                # Random horizontal flips (the CIFAR recipe's augmentation).
                flip = torch.rand(len(idx), generator=generator) < 0.5
                x = torch.where(flip[:, None, None, None], x.flip(3), x)
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y) if name == "resnet20" else torch.nn.functional.nll_loss(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += float(loss.detach()) * len(idx)
            correct += int((out.argmax(1) == y).sum())
            total += len(idx)
        print(f"train: {name} epoch {epoch + 1}/{epochs}: loss {loss_sum / total:.4f}, "
              f"train accuracy {correct / total:.4f}, {time.time() - start:.0f} s", flush=True)
    return model


@torch.inference_mode()
def evaluate(model, test_x: torch.Tensor) -> torch.Tensor:
    model.eval()
    return torch.cat([model(test_x[i : i + 500]) for i in range(0, len(test_x), 500)])


def write_reference(name: str, model, test_x, test_y, out: Path, epochs) -> float:
    outputs = evaluate(model, test_x)
    predictions = outputs.argmax(1)
    accuracy = float((predictions == test_y).float().mean())
    save_file(
        {
            "logits": outputs[:REFERENCE_IMAGES].contiguous(),
            "predictions": predictions.to(torch.uint8).contiguous(),
            "labels": test_y.to(torch.uint8).contiguous(),
        },
        str(out / f"{name}.reference.safetensors"),
        metadata={
            "network": name,
            "dataset": "fashion-mnist test set (t10k), images 0..9999; logits of images 0..255",
            "accuracy": repr(accuracy),
            "torch": torch.__version__,
            "epochs": str(epochs),
        },
    )
    return accuracy


def write_train_reference(name: str, model, train_images, train_labels, out: Path) -> float:
    """One training step's gradients and two steps' parameters (see the
    module docstring); returns the loss."""
    x = network_input(train_images[:TRAIN_REFERENCE_BATCH], NETWORKS[name].input_shape)
    y = torch.from_numpy(train_labels[:TRAIN_REFERENCE_BATCH].astype(np.int64))
    batch_norm = name == "resnet20"
    if batch_norm:
        model.train()  # batch statistics, running statistics updated; resnet20 has no dropout
    else:
        model.eval()  # dropout off: a deterministic step, as the C++ one
    opt = torch.optim.SGD(model.parameters(), lr=TRAIN_REFERENCE_LR, momentum=TRAIN_REFERENCE_MOMENTUM)
    tensors = {"labels": y.to(torch.uint8).contiguous()}
    for step in (1, 2):
        opt.zero_grad(set_to_none=True)
        output = model(x)
        log_probs = torch.nn.functional.log_softmax(output, dim=1) if batch_norm else output
        loss = torch.nn.functional.nll_loss(log_probs, y)
        loss.backward()
        if step == 1:
            tensors["loss"] = loss.detach().reshape(1).contiguous()
            tensors["log_probs"] = log_probs.detach().contiguous()
            for pname, p in model.named_parameters():
                tensors[f"grad.{pname}"] = p.grad.detach().clone().contiguous()
            first_loss = float(loss.detach())
            for bname, b in model.named_buffers():
                if bname.endswith(".running_mean") or bname.endswith(".running_var"):
                    tensors[f"step1.{bname}"] = b.detach().clone().contiguous()
        opt.step()
    skip = TRAIN_REFERENCE_STEP2_SKIP[name]
    for pname, p in model.named_parameters():
        if not skip(pname):
            tensors[f"step2.{pname}"] = p.detach().clone().contiguous()
    for bname, b in model.named_buffers():
        if bname.endswith(".running_mean") or bname.endswith(".running_var"):
            tensors[f"step2.{bname}"] = b.detach().clone().contiguous()
    save_file(tensors, str(out / f"{name}.train-reference.safetensors"), metadata={
        "network": name,
        "dataset": f"fashion-mnist training set, images 0..{TRAIN_REFERENCE_BATCH - 1}, no augmentation",
        "batch": str(TRAIN_REFERENCE_BATCH),
        "loss": repr(first_loss),
        "lr": repr(TRAIN_REFERENCE_LR),
        "momentum": repr(TRAIN_REFERENCE_MOMENTUM),
        "mode": "train (batch-norm on batch statistics)" if batch_norm else "eval (dropout off)",
        "parameters": ",".join(pname for pname, _ in model.named_parameters()),
        "torch": torch.__version__,
    })
    return first_loss


def run_epoch(name, train_images, train_labels, test_images, test_labels, threads: int) -> dict:
    """One epoch of SGD from the fresh start on `threads` threads: every
    step's loss, the test accuracy and loss after it."""
    torch.set_num_threads(threads)
    shape = NETWORKS[name].input_shape
    model, check = torch_epoch.fresh_model(name)  # dropout off, as the C++ step
    order = torch_epoch.order(len(train_images))
    train_x = network_input(train_images, shape)
    train_y = torch.from_numpy(train_labels.astype(np.int64))
    opt = torch_epoch.optimizer(model)
    steps = torch_epoch.steps_of(len(order))
    losses = []
    start = time.time()
    for s in range(steps):
        idx = torch.from_numpy(torch_epoch.batch_indices(order, s))
        losses.append(float(torch_epoch.eager_step(model, opt, train_x[idx], train_y[idx])))
    seconds = time.time() - start
    outputs = torch_epoch.evaluate(model, network_input(test_images, shape))
    test_y = torch.from_numpy(test_labels.astype(np.int64))
    accuracy, test_loss = torch_epoch.accuracy_and_loss(outputs, test_y)
    print(f"train: {name}: epoch on {threads} threads, {steps} steps in {seconds:.0f} s, first loss "
          f"{losses[0]:.6f}, last {losses[-1]:.4f}, test accuracy {accuracy:.4f}", flush=True)
    return {
        "threads": threads,
        "losses": [float(f"{v:.9g}") for v in losses],
        "test_accuracy": accuracy,
        "test_loss": test_loss,
        "init_check": check,
        "order_head": [int(i) for i in order[:16]],
        "train_images": len(order),
        "test_images": len(test_y),
    }


def write_epoch_reference(name, train_images, train_labels, test_images, test_labels, out: Path, threads: int):
    """One epoch from the fresh start on `threads` threads and on 1 (see the
    module docstring): two roundings of the same computation, whose test
    accuracies differ by rounding alone."""
    runs = [run_epoch(name, train_images, train_labels, test_images, test_labels, t)
            for t in sorted({threads, 1}, reverse=True)]
    main = runs[0]
    reference = {
        "network": name,
        "made_by": "scripts/train.py --epoch-reference",
        "torch": torch.__version__,
        "threads": main["threads"],
        "batch": EPOCH_BATCH,
        "lr": EPOCH_LR,
        "momentum": EPOCH_MOMENTUM,
        "weight_decay": 0.0,
        "init_seed": EPOCH_SEED,
        "order_seed": EPOCH_SEED,
        "augmentation": "none",
        "dropout": "off (model.eval())",
        "train_images": main["train_images"],
        "steps": len(main["losses"]),
        "init_check": main["init_check"],
        "order_head": main["order_head"],
        "losses": main["losses"],
        "test_images": main["test_images"],
        "test_accuracy": main["test_accuracy"],
        "test_loss": main["test_loss"],
        "other_runs": [{k: r[k] for k in ("threads", "losses", "test_accuracy", "test_loss")} for r in runs[1:]],
    }
    path = out / f"{name}.epoch-reference.json"
    path.write_text(json.dumps(reference, indent=1) + "\n")
    print(f"train: {name}: epoch reference -> {path}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", default=",".join(NETWORKS))
    parser.add_argument("--epochs", type=int, default=None, help="override every network's epoch count")
    parser.add_argument("--data-dir", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--out", type=Path, default=ROOT / "models" / "fashion-mnist")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--reference-only", action="store_true")
    parser.add_argument("--train-reference", action="store_true",
                        help="write <net>.train-reference.safetensors from the committed weights "
                             "(mnist_cnn, resnet20)")
    parser.add_argument("--epoch-reference", action="store_true",
                        help="write <net>.epoch-reference.json: one epoch from a fresh start (mnist_cnn, mnist_lenet)")
    args = parser.parse_args()

    names = args.nets.split(",")
    for name in names:
        if name not in NETWORKS:
            print(f"train: unknown network '{name}' (known: {', '.join(NETWORKS)})", file=sys.stderr)
            return 2
    if not (args.data_dir / "train-images-idx3-ubyte.gz").exists():
        print(f"train: no Fashion-MNIST in {args.data_dir} (apt-get install dataset-fashion-mnist)", file=sys.stderr)
        return 2

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    args.out.mkdir(parents=True, exist_ok=True)
    train_images, train_labels = load_fashion(args.data_dir, "train")
    test_images, test_labels = load_fashion(args.data_dir, "test")
    if args.epoch_reference:
        for name in names:
            if name not in EPOCH_NETS:
                print(f"train: no epoch reference for {name} (the C++ step supports {', '.join(EPOCH_NETS)})",
                      file=sys.stderr)
                return 2
        for name in names:
            write_epoch_reference(name, train_images, train_labels, test_images, test_labels, args.out, args.threads)
        return 0
    if args.train_reference:
        for name in names:
            if name not in TRAIN_REFERENCE_NETS:
                print(f"train: no training reference for {name} (the C++ step supports "
                      f"{', '.join(TRAIN_REFERENCE_NETS)})", file=sys.stderr)
                return 2
            model = NETWORKS[name]()
            model.load_state_dict(load_file(str(args.out / f"{name}.safetensors")))
            loss = write_train_reference(name, model, train_images, train_labels, args.out)
            print(f"train: {name}: training reference, loss {loss:.6f} -> "
                  f"{args.out / (name + '.train-reference.safetensors')}", flush=True)
        return 0
    for name in names:
        shape = NETWORKS[name].input_shape
        test_x = network_input(test_images, shape)
        test_y = torch.from_numpy(test_labels.astype(np.int64))
        weights = args.out / f"{name}.safetensors"
        if args.reference_only:
            model = NETWORKS[name]()
            model.load_state_dict(load_file(str(weights)))
            epochs = "see weights"
        else:
            epochs = args.epochs or DEFAULT_EPOCHS[name]
            train_x = network_input(train_images, shape)
            train_y = torch.from_numpy(train_labels.astype(np.int64))
            model = train(name, epochs, train_x, train_y)
            state = {k: v.contiguous() for k, v in model.state_dict().items()}
            save_file(state, str(weights), metadata={
                "network": name,
                "dataset": "fashion-mnist",
                "input_mean": repr(FASHION_MEAN),
                "input_std": repr(FASHION_STD),
                "seed": str(SEED),
                "epochs": str(epochs),
                "torch": torch.__version__,
            })
        accuracy = write_reference(name, model, test_x, test_y, args.out, epochs)
        print(f"train: {name}: test accuracy {accuracy:.4f} -> {weights}", flush=True)
    return 0


if __name__ == "__main__":
    cli.run(main)
