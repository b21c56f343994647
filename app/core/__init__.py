"""Pure decisions and parsing: no database session, no gateway, no I/O beyond package data files."""
