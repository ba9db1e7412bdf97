"""What touches the disk and the device: atomic writes, run-directory locks, checkpoints, devices, torchrun."""
