"""The pages of the browser app, run by ``st.navigation`` from ``app/ui/Home.py`` (scripts:
importing one draws it, so nothing imports them)."""
