"""The web view of ``chronus serve`` (``/ui``) and the HTML report of replays: server-rendered
pages (Jinja2) with inline SVG drawn in Python, and htmx (a static file, no build step) for the
live parts."""
