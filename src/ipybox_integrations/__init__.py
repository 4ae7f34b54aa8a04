"""Adapters that give agent frameworks ipybox's ``execute_code`` tool.

Each framework lives in its own module (``ipybox_integrations.pydantic_ai``, ``.langchain``,
``.openai_agents``) and imports its framework only when used.
"""
