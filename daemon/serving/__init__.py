"""Serving: the socket and what each request does.

``server`` accepts connections and frames, ``service`` handles each request,
``scopes`` reads a path filter the same way for search, grep and find_files,
``filtering`` a request's filters on what files hold (and notes on those that match
nothing),
``replies`` turns the daemon's state and answers into protocol messages, ``control``
changes roots and settings while the daemon runs, ``instance`` holds the single-daemon
lock, ``notify`` and ``activation`` speak to systemd, ``refusal`` serves a refused
configuration on systemd's socket.
"""
