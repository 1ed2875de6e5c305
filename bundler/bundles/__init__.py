"""Operations on a bundle of either kind: read it, dispatch on its schema to the
EvalBook or eval-banana verifier, and act on a verified bundle (inspect, extract,
audit, prove, sign). Above both bundle kinds, so neither imports the other's verifier."""
