"""slowlink.collectives"""
