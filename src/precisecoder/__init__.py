"""PreciseCoder: post-training code models to fix bugs precisely (JAX/Flax)."""

__version__ = "0.1.0"
