"""Every way of saying ".." between a notebook's prefix and another notebook's id that the old
auth endpoint answered 200 for: the gateway tests send each one through Traefik."""

TRAVERSALS = (
    "../",
    "%2e%2e/",
    "%2E%2E/",
    "..%2f",
    "..%2F",
    "..;/",
    ".%2e/",
    "..%5c",
    "/../",
    "./../",
)
