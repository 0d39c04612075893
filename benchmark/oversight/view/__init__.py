"""The adjudicator's web workbench (`python -m benchmark view RUN...`): a local Flask app with server-rendered,
autoescaped Jinja templates (no scripts, no asset from the web).

Modules: cli (the `view` verb; imports nothing heavy), app (routes), workbench (runs, ledgers, leaderboard cache),
world (one result's page), files (artifact serving), security (token, CSRF, host checks). Templates are loaded from
`templates/` beside app.py through Flask's template_folder, which works in an editable install without a
package-data entry in pyproject.toml.
"""
