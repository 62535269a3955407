"""Protocol mode: the deployed paper protocol in process, and the coverage of its CIs per n and per score shape."""

__all__: list[str] = []
