"""
Poor man's configurator. Run as:
$ python train.py config/override_file.py --batch_size=32
Each --key=value overrides a global of train.py; values are parsed with literal_eval.
"""
import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if '=' not in arg:
        # a config file
        assert not arg.startswith('--')
        print(f"Overriding config with {arg}:")
        exec(open(arg).read())
    else:
        assert arg.startswith('--')
        key, val = arg.split('=')
        key = key[2:]
        if key in globals():
            try:
                attempt = literal_eval(val)
            except (SyntaxError, ValueError):
                attempt = val
            assert type(attempt) == type(globals()[key])
            print(f"Overriding: {key} = {attempt}")
            globals()[key] = attempt
        else:
            raise ValueError(f"Unknown config key: {key}")
