"""slowlink.bench"""
