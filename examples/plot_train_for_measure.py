"""
Train for G-mean and watch the held-out choice
==============================================

:func:`calopt.fit` trains the plug-in route (L-BFGS on the logistic loss) for the measure
you name and chooses the regularisation, the number of passes and the threshold on rows
the weights did not see. ``eval_set`` adds the test value after every pass to the
model's history, which is drawn here beside the pass the selection kept.
"""

import matplotlib.pyplot as plt

import calopt
from calopt import datasets

train, test = datasets.load("ijcnn1", "train"), datasets.load("ijcnn1", "test")
model = calopt.fit(train.X, train.labels, measure="gmean", eval_set=(test.X, test.labels))
print(model.describe())
print("test G-mean:", round(model.score(test.X, test.labels), 4))

epochs = [entry["epoch"] for entry in model.history]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(epochs, [entry["train"] for entry in model.history], label="training rows")
ax.plot(epochs, [entry["test"] for entry in model.history], label="test rows")
ax.axvline(model.fit_report.epochs, color="grey", linestyle=":", label="pass kept")
ax.set_xlabel("pass over the data")
ax.set_ylabel("G-mean at the tuned threshold")
ax.set_title(model.describe())
ax.legend()
fig.tight_layout()
