"""The SQL corpus (``corpus.py``): its queries, tables, recorded answers and the simulator's responder."""
