def helper(x):
    return x + 1
