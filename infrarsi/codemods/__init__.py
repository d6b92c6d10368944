"""libcst codemods InfraRSI applies to a user's training code, one per module."""
