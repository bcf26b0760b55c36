"""The Textual front end: screens, widgets and one stylesheet; measurement lives in the engine."""
