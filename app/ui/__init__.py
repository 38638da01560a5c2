"""winnow's browser app (Streamlit): ``Home.py`` builds the navigation, ``views/`` holds the
thin pages, ``state`` the per-tab state and ``components`` the shared drawing helpers.

The pages are Streamlit scripts, run by ``streamlit run app/ui/Home.py``; importing this
package runs none of them.
"""
