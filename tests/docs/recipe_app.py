"""The FastAPI recipe's app (``fastapi_app``, copied next to this file's caller) with one change: the
model. ``chat_model()`` returns a scripted model that runs the user's message as the agent's code and
answers with the code's result, so the test needs no key and no network.

Served as ``uvicorn recipe_app:app --app-dir tests/docs`` from the folder that holds the recipe's
files (``fastapi_app.py`` is imported from the working directory).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage

sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "langchain"))
sys.path.insert(0, os.getcwd())

import fastapi_app
from lc_kit import ScriptedChatModel, tool_call


def runs_the_message(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if last.type == "tool":
        return AIMessage(content=last.text)
    return AIMessage(content="", tool_calls=[tool_call(last.text, f"call_{len(messages)}")])


fastapi_app.chat_model = lambda: ScriptedChatModel(script=runs_the_message)
app = fastapi_app.app
