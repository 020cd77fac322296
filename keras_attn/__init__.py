"""keras_attn: attention layers for recommender systems and NLP, on both Keras
generations.

Keras is resolved once, in `keras_attn.backend`, with the rule `tf.keras` follows:
Keras 3
by default, `tf_keras` (Keras 2) when `TF_USE_LEGACY_KERAS=1`. Importing this package
sets
nothing, prints nothing and touches no network.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
