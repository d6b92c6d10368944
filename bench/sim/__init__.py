"""An analytic simulation of transformer training on a GPU cluster, validated against published
measurements (docs/sim.md): ``hardware`` (GPUs and clusters as data), ``model`` (step time and peak
memory of one configuration), ``validate`` (the model against Narayanan et al. 2021 and Korthikanti et
al. 2022).
"""
