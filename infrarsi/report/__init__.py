"""The report: everything a run measured, gathered into one value and rendered as Markdown, HTML and plots.

:mod:`model` gathers (no rendering), :mod:`plots` draws, :mod:`markdown` and :mod:`html` write
documents; the terminal tables live in :mod:`infrarsi.cli.report`.
"""
