"""slowlink.topology"""
