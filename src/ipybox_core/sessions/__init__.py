"""One kernel per conversation: executors made from a template, per session key."""

from ipybox_core.sessions._sessions import Session, SessionLimitError, Sessions, UnknownRedirect

__all__ = ["Session", "SessionLimitError", "Sessions", "UnknownRedirect"]
