"""A small image classifier trained the way PyTorch's ImageNet example trains ResNets."""

import argparse
import json
import time

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class RandomImages(Dataset):
    """Deterministic fake images: sample i is made from seed i."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        image = torch.randn(3, 16, 16, generator=g)
        label = int(torch.randint(0, 10, (1,), generator=g))
        return image, label


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


def main():
    parser = argparse.ArgumentParser(description="PyTorch ImageNet-style training")
    parser.add_argument("--gpu", default=0, type=int, help="GPU id to use.")
    parser.add_argument("--no-cuda", action="store_true")
    parser.add_argument("-j", "--workers", default=2, type=int)
    parser.add_argument("--epochs", default=2, type=int)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = make_model()
    use_cuda = torch.cuda.is_available() and not args.no_cuda
    if use_cuda:
        torch.cuda.set_device(args.gpu)
        model.cuda(args.gpu)
        cudnn.benchmark = True
        device = torch.device(f"cuda:{args.gpu}")
    else:
        device = torch.device("cpu")

    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    loader = DataLoader(
        RandomImages(96),
        batch_size=16,
        shuffle=False,
        num_workers=args.workers,
        pin_memory=True,
        persistent_workers=False,
    )

    pinned = []
    epoch_losses = []
    correct = 0
    start_event = torch.cuda.Event(enable_timing=True) if use_cuda else None
    end_event = torch.cuda.Event(enable_timing=True) if use_cuda else None
    wall = time.time()
    for epoch in range(args.epochs):
        model.train()
        if use_cuda:
            start_event.record()
        total = 0.0
        for images, target in loader:
            pinned.append(images.is_pinned())
            if use_cuda:
                images = images.cuda(args.gpu, non_blocking=True)
                target = target.cuda(args.gpu, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            if epoch == args.epochs - 1:
                correct += (output.argmax(1) == target).sum().item()
        scheduler.step()
        if use_cuda:
            end_event.record()
            torch.cuda.synchronize()
            epoch_ms = start_event.elapsed_time(end_event)
            assert epoch_ms > 0
        epoch_losses.append(total / len(loader))

    result = {
        "device": str(next(model.parameters()).device),
        "losses": epoch_losses,
        "correct": correct,
        "running_mean": model[1].running_mean.sum().item(),
        "pinned": all(pinned),
        "seconds": time.time() - wall,
    }
    if use_cuda:
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        result["memory_stats_keys"] = "allocated_bytes.all.current" in torch.cuda.memory_stats()
        torch.cuda.empty_cache()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
