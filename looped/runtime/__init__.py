"""What touches the disk and the device: atomic writes, failpoints, run-directory locks, checkpoints, devices, torchrun."""
