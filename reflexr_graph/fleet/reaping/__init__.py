"""The jobs of one reaper pass, one module each (issue 36): fleet/reaper.py runs them in order.

A pass used to be one method doing nine things; each is now a job that says what it reads from the
pass's one read (``reaper_tick.lua``), what it does, and when it is due (reaping/job.py has the
interface). Their order, and why, is written once where fleet/reaper.py lists them. Modules are
imported where used rather than re-exported here.
"""
