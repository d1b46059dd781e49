"""formats: one reader per source format, and the registry that picks one by kind (registry.py).

pdf.py (with ocr.py), epub.py (with xhtml.py), docx.py, code.py, legal.py (legal XML),
archive.py (legal folders and archives), text.py (plain text, HTML, JSON Lines); members.py reads
the members of zips, tars and folders under the hostile-input rules for all of them. A reader is a
pure function of its source (path -> ExtractResult): no corpus directory, no cache.
"""
