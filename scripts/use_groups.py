"""Rust `use` groups, for the import checks (scripts/module-deps.sh, scripts/file-deps.sh)."""


def split_group(body):
    """The items of a `use` group's body (what stands between its braces), split at the
    commas that are not inside a nested group."""
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts
