# scikit-learn's array API dispatch needs SciPy's array API mode, set before SciPy is imported
# (test_sklearn_array_api.py); the other tests pass NumPy arrays to SciPy and scikit-learn.
import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")
