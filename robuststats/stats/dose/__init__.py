"""Dose-response curves and the critical threshold of a noise sweep.

``_models`` holds drc's curves (Ritz et al. 2015), ``_fitting`` the optimiser,
``_response`` the fits and model selection, ``_curve`` the fitted curve and the doses it
answers, ``_threshold`` the critical threshold with its seed-random, delta-method or
bootstrap interval. The public names are exported by :mod:`robuststats.stats`.
"""
