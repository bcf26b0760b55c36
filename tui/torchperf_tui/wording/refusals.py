"""What to change to get past a refusal, in the words of the front end that shows it: the CLI names an option
(`--model-args num_hidden_layers=2`), the app the field where the same setting is typed ("num_hidden_layers=2 in
the args field (sidebar, under the model list)"). The engine says which setting and what value
(engine.errors.Remedy); the CLI's words are the option's own (Remedy.cli_words), the app's are here, once.
"""

from __future__ import annotations

from typing import Iterable

from torchperf_tui.core.errors import CLI_VERBS, Remedy, TorchperfError, first_line, remedies_text, user_message

# A setting a refusal can ask to change -> where it is in the app. A setting with no place in the app (the CLI's
# --generate: the app generates a fixed number of tokens) is left out of the app's sentence.
APP_FIELDS = {
    "model_args": "the args field (sidebar, under the model list)",
    "seq_len": "the seq field (sidebar, beside args)",
    "prompt_len": "the seq field (sidebar, beside args: the prompt's length)",
    "dtype": "the dtype list (sidebar, under args)",
}
APP_VERBS = {"give": "give", "use": "use", "clear": "clear"}
FRONTS = ("cli", "app")


def remedy_words(remedy: Remedy, front: str = "cli") -> tuple[str, str] | None:
    """(verb, words) of one remedy for `front` ("cli" or "app"); None when the app has no place for its setting."""
    if front == "cli":
        return CLI_VERBS[remedy.action], remedy.cli_words()
    if remedy.setting is None:
        words = remedy.value
    elif remedy.setting not in APP_FIELDS:
        return None
    elif remedy.action == "give":
        words = f"{remedy.value} in {APP_FIELDS[remedy.setting]}"
    else:
        words = APP_FIELDS[remedy.setting]
    return APP_VERBS[remedy.action], " ".join(part for part in (words, remedy.purpose) if part)


def refusal_text(refusal: str, remedies: Iterable[Remedy], front: str = "cli") -> str:
    """The refusal and what to change, in `front`'s words: 'hf:llama: ... 18.1 GiB free; give num_hidden_layers=2
    in the args field (sidebar, under the model list) for fewer layers, or bfloat16 in the dtype list (sidebar,
    under args) for half the bytes'; the refusal alone when none of them has a place there."""
    if front not in FRONTS:
        raise ValueError(f"front {front!r}: one of {', '.join(FRONTS)}")
    clauses = [words for words in (remedy_words(r, front) for r in remedies) if words is not None]
    return f"{refusal}; {remedies_text(clauses)}" if clauses else refusal


def said_in_app(error: str, refusal: str = "", remedies: Iterable[Remedy] = ()) -> str:
    """A job's one-line error (JobFailed: `error` in the CLI's words) as the app says it."""
    remedies = tuple(remedies)
    return refusal_text(refusal, remedies, front="app") if remedies else error


def app_message(exc: BaseException) -> str:
    """engine.errors.user_message, as the app says it: a refusal's remedies name the app's fields."""
    if isinstance(exc, TorchperfError) and exc.remedies:
        return refusal_text(first_line(exc.refusal), exc.remedies, front="app")
    return user_message(exc)
