"""Reporting: calopt against scikit-learn's routes (:mod:`calopt.reporting.comparison`) and the figures of training runs (:mod:`calopt.reporting.plotting`).

This layer stands above the scikit-learn estimator (:mod:`calopt.sklearn`, whose scorers
the comparison uses) and training, below the command line (``calopt compare``,
``calopt train --plot``); ``lint-imports`` checks it (pyproject.toml). The modules are
not imported here: the comparison needs scikit-learn's model selection and the figures
need matplotlib, an optional extra, so each is imported when it is used.
"""
