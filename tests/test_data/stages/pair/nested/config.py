"""A small config node: attributes set in code, overridden by ``--path.to.key=value`` arguments."""

import ast


class Node:
    def merge_from_args(self, args):
        for arg in args:
            key, _, text = arg.removeprefix("--").partition("=")
            *parents, leaf = key.split(".")
            node = self
            for part in parents:
                node = getattr(node, part)
            try:
                value = ast.literal_eval(text)
            except ValueError:
                value = text
            setattr(node, leaf, value)
