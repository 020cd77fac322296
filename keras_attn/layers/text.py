"""Deprecated: the text models' layers moved to modules named for what they hold.

`SequencePooling` (`keras_attn.layers.pooling`), `PredictedLabel`
(`keras_attn.layers.labels`), `TokenMask` and `SegmentIds`
(`keras_attn.layers.token_ids`), `PerSentence` (`keras_attn.layers.per_sentence`),
`CandidateSum` (`keras_attn.layers.aoa`), `NgramLinear` (`keras_attn.layers.wide`),
all importable from `keras_attn.layers`; `HashedNgrams` (it splits text as the
tokenizers do) from `keras_attn.text`. The old names here work for one release and
warn.
"""

from keras_attn._deprecation import moved

__getattr__ = moved(
    __name__,
    {
        "COMBINERS": "keras_attn.layers.wide:COMBINERS",
        "TERM_WEIGHTINGS": "keras_attn.layers.wide:TERM_WEIGHTINGS",
        "NgramLinear": "keras_attn.layers.wide:NgramLinear",
        "POOLINGS": "keras_attn.layers.pooling:SEQUENCE_POOLINGS",
        "SequencePooling": "keras_attn.layers.pooling:SequencePooling",
        "PredictedLabel": "keras_attn.layers.labels:PredictedLabel",
        "TokenMask": "keras_attn.layers.token_ids:TokenMask",
        "SegmentIds": "keras_attn.layers.token_ids:SegmentIds",
        "PerSentence": "keras_attn.layers.per_sentence:PerSentence",
        "CandidateSum": "keras_attn.layers.aoa:CandidateSum",
        "HashedNgrams": "keras_attn.text.ngrams:HashedNgrams",
    },
)
