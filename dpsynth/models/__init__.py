"""Models: the shipped models (their Stan programs in ``dpsynth/stan/`` and numpy mirrors),
the scaling to and from the Stan scale, record centring, a user's model as pieces and the
checks of whole user programs, and the one module that makes synthetic records from
posterior draws and public inputs (``synthesis``)."""
