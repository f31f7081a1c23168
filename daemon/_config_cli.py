"""placeholder"""
from __future__ import annotations
import argparse
def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pass
