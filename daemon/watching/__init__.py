"""Watching: how a file change reaches the indexer.

``watcher`` supervises one watch per root (inotify, or polling where inotify cannot
serve), ``inotify`` is the only module that touches watchdog's private inotify code,
``router`` turns events into paths for the queue, ``changes`` debounces and coalesces
them, and ``reconciler`` hands what settled to the indexer, with periodic scans as the
truth behind the events.
"""
