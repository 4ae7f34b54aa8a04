"""Code that runs inside the kernel (shipped into a gateway kernel as source).

Standard library only, so that it works in any kernel environment; ``tests/core/inkernel`` imports
the package in a bare interpreter and fails on any other import.
"""
