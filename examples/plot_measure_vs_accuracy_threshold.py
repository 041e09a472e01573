"""
The threshold matters as much as the weights
============================================

On imbalanced data a classifier thresholded for accuracy predicts the rare class too
rarely. This example scores the same logistic model (scikit-learn's
``LogisticRegression``) at its default threshold and calopt's model, trained for each
measure, on the test split of the embedded ijcnn1 data (about 10% positives).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import MaxAbsScaler

import calopt
from calopt import datasets
from calopt.sklearn import measure_score

train, test = datasets.load("ijcnn1", "train"), datasets.load("ijcnn1", "test")
scaler = MaxAbsScaler().fit(train.X)
plain = LogisticRegression(max_iter=1000).fit(scaler.transform(train.X), train.labels)
predicted = plain.predict(scaler.transform(test.X))

measures = ["f1", "gmean", "hmean", "min"]
default, trained = [], []
for name in measures:
    default.append(measure_score(test.labels, predicted, measure=name, pos_label=1))
    trained.append(calopt.fit(train.X, train.labels, measure=name).score(test.X, test.labels))
    print(f"{name:6s} LogisticRegression at 0.5: {default[-1]:.4f}   calopt: {trained[-1]:.4f}")

x = np.arange(len(measures))
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar(x - 0.2, default, 0.4, label="LogisticRegression, threshold 0.5")
ax.bar(x + 0.2, trained, 0.4, label="calopt, trained for the measure")
ax.set_xticks(x, measures)
ax.set_ylabel("test value")
ax.set_ylim(0, 1)
ax.legend(loc="lower right")
fig.tight_layout()
