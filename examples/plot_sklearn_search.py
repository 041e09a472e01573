"""
In a scikit-learn pipeline and grid search
==========================================

:class:`calopt.sklearn.CaloptClassifier` is an ordinary scikit-learn classifier, and
:func:`calopt.sklearn.make_scorer` turns any calopt measure into a scorer. Here a
grid search chooses between the plug-in route and SPADE, the G-mean's own stochastic
solver (paper 002), by 3-fold cross-validated G-mean on a 5,000-row sample of ijcnn1.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV

from calopt import datasets
from calopt.sklearn import CaloptClassifier, make_scorer

train = datasets.load("ijcnn1", "train")
rows = np.random.default_rng(0).choice(train.X.shape[0], 5000, replace=False)
X, y = train.X[rows], train.labels[rows]

search = GridSearchCV(CaloptClassifier("gmean"), {"algorithm": ["lbfgs", "spade"]},
                      scoring=make_scorer("gmean"), cv=3).fit(X, y)
print("best:", search.best_params_, round(search.best_score_, 4))

names = [params["algorithm"] for params in search.cv_results_["params"]]
fig, ax = plt.subplots(figsize=(5, 3))
ax.errorbar(names, search.cv_results_["mean_test_score"], yerr=search.cv_results_["std_test_score"],
            fmt="o", capsize=4)
ax.set_ylabel("cross-validated G-mean")
fig.tight_layout()
