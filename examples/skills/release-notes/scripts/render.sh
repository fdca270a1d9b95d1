#!/bin/sh
# Writes the heading of RELEASE_NOTES.md for version $1 (runs confined in the sandbox).
printf '# Release %s\n\n' "${1:?version}" > RELEASE_NOTES.md
echo '{"written": "RELEASE_NOTES.md"}'
