"""Human renderings of results: console text and Markdown."""
