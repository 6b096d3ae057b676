"""Running rows and reporting them, for every method: runners, metrics, report, figures.

This is analysis code: with the suites it is the only place outside a domain that may read an
:class:`~cfjax.types.AnswerKey` (transfer conditions, harm labels)."""
