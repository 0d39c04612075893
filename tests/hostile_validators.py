"""Product validators that misbehave on purpose, imported by the capped grading worker in tests only."""
import os
import time

from graders.registry import product_validator


@product_validator("test.hog_memory")
def hog_memory(path, golden, check):
    blocks = [bytearray(256 << 20) for _ in range(64)]  # 16 GiB: past the worker's address-space cap
    return 1.0, f"allocated {len(blocks)} blocks"


@product_validator("test.hang")
def hang(path, golden, check):
    time.sleep(3600)
    return 1.0, "woke up"


@product_validator("test.die")
def die(path, golden, check):
    os._exit(3)


@product_validator("test.ok")
def ok(path, golden, check):
    return 1.0, f"read {os.path.getsize(path)} bytes"
