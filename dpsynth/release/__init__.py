"""Release: the one path from confidential data to a published file (settings, runners, the
public report and the confidential diagnostics), its safeguards (budget charge, missing
values) and the plan on a public reference file."""
